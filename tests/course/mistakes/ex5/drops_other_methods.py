# mistake: knows only elicitation/create and roots/list; sampling and other entries vanish | outcome: incorrect | next: a request for each
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    requests = []
    for key, entry in input_requests.items():
        if entry["method"] not in ("elicitation/create", "roots/list"):
            continue
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        if "params" in entry:
            params = dict(entry["params"])
            if params.get("mode") == "url":
                params["elicitationId"] = new_elicitation_id()
            request["params"] = params
        requests.append((key, request))
    return requests
