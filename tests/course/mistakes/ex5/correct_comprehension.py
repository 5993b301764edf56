# correct: a helper per request and a list comprehension
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    return [(key, _legacy(entry, next_id, new_elicitation_id)) for key, entry in input_requests.items()]


def _legacy(entry, next_id, new_elicitation_id):
    request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
    if "params" in entry:
        extra = {}
        if entry["method"] == "elicitation/create" and entry["params"].get("mode") == "url":
            extra["elicitationId"] = new_elicitation_id()
        request["params"] = {**entry["params"], **extra}
    return request
