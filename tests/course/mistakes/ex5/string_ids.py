# mistake: turns each id into a string | outcome: incorrect | next: as next_id() returns it
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    requests = []
    for key, entry in input_requests.items():
        request = {"jsonrpc": "2.0", "id": str(next_id()), "method": entry["method"]}
        if "params" in entry:
            params = dict(entry["params"])
            if entry["method"] == "elicitation/create" and params.get("mode") == "url":
                params["elicitationId"] = new_elicitation_id()
            request["params"] = params
        requests.append((key, request))
    return requests
