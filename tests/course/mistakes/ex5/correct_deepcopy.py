# correct: a deep copy of each entry, then the one change
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for key in input_requests:
        request = copy.deepcopy(dict(input_requests[key]))
        request = {"jsonrpc": "2.0", "id": next_id(), **request}
        params = request.get("params")
        if request["method"] == "elicitation/create" and isinstance(params, dict):
            if params.get("mode", "form") == "url":
                params["elicitationId"] = new_elicitation_id()
        out.append((key, request))
    return out
