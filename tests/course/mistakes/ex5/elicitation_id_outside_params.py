# mistake: puts the elicitationId on the request itself instead of inside params | outcome: incorrect | next: inside params
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    requests = []
    for key, entry in input_requests.items():
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        if "params" in entry:
            request["params"] = dict(entry["params"])
            if entry["params"].get("mode") == "url":
                request["elicitationId"] = new_elicitation_id()
        requests.append((key, request))
    return requests
