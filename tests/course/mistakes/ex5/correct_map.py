# correct: map over the items with a function that builds each request from scratch, params merged with **
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    def convert(item):
        key, entry = item
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        params = entry.get("params")
        if params is not None:
            url_mode = entry["method"] == "elicitation/create" and params.get("mode") == "url"
            extra = {"elicitationId": new_elicitation_id()} if url_mode else {}
            request["params"] = {**params, **extra}
        return key, request

    return list(map(convert, input_requests.items()))
