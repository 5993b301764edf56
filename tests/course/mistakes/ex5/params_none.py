# mistake: always sets params, so roots/list (which has none) goes out with "params": None | outcome: incorrect | next: params only when
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    requests = []
    for key, entry in input_requests.items():
        params = dict(entry["params"]) if "params" in entry else None
        if params and entry["method"] == "elicitation/create" and params.get("mode") == "url":
            params["elicitationId"] = new_elicitation_id()
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"], "params": params}
        requests.append((key, request))
    return requests
