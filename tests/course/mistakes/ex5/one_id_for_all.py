# mistake: calls next_id() once and gives every request the same id | outcome: incorrect | next: once per entry
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    request_id = next_id()
    requests = []
    for key, entry in input_requests.items():
        request = {"jsonrpc": "2.0", "id": request_id, "method": entry["method"]}
        if "params" in entry:
            params = dict(entry["params"])
            if entry["method"] == "elicitation/create" and params.get("mode") == "url":
                params["elicitationId"] = new_elicitation_id()
            request["params"] = params
        requests.append((key, request))
    return requests
