# mistake: draws one elicitationId before the loop and gives it to every URL entry | outcome: incorrect | next: fresh elicitationId per URL entry
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    elicitation_id = new_elicitation_id()
    requests = []
    for key, entry in input_requests.items():
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        if "params" in entry:
            params = dict(entry["params"])
            if entry["method"] == "elicitation/create" and params.get("mode") == "url":
                params["elicitationId"] = elicitation_id
            request["params"] = params
        requests.append((key, request))
    return requests
