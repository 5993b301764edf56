# correct: a plain loop, a shallow copy of each params before the one key is added
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    pairs = []
    for key, entry in input_requests.items():
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        if entry.get("params") is not None:
            params = dict(entry["params"])
            if entry["method"] == "elicitation/create" and params.get("mode") == "url":
                params["elicitationId"] = new_elicitation_id()
            request["params"] = params
        pairs.append((key, request))
    return pairs
