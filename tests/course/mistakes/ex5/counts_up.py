# mistake: takes one id from next_id() and counts up from it | outcome: incorrect | next: next_id() handed out
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    first = next_id() if input_requests else 0
    requests = []
    for n, (key, entry) in enumerate(input_requests.items()):
        request = {"jsonrpc": "2.0", "id": first + n, "method": entry["method"]}
        if "params" in entry:
            params = dict(entry["params"])
            if entry["method"] == "elicitation/create" and params.get("mode") == "url":
                params["elicitationId"] = new_elicitation_id()
            request["params"] = params
        requests.append((key, request))
    return requests
