# mistake: iterates sorted(input_requests), so the requests come back in key order, not the map's order | outcome: incorrect | next: map's order
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    requests = []
    for key in sorted(input_requests):
        entry = input_requests[key]
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        if "params" in entry:
            params = dict(entry["params"])
            if entry["method"] == "elicitation/create" and params.get("mode") == "url":
                params["elicitationId"] = new_elicitation_id()
            request["params"] = params
        requests.append((key, request))
    return requests
