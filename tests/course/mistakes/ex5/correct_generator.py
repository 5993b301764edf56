# correct: a generator turned into a list, with the URL test in a named helper
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    def is_url(entry):
        params = entry.get("params") or {}
        return entry["method"] == "elicitation/create" and params.get("mode") == "url"

    def requests():
        for key, entry in input_requests.items():
            request = dict(jsonrpc="2.0", id=next_id(), method=entry["method"])
            if "params" in entry:
                request["params"] = dict(entry["params"])
                if is_url(entry):
                    request["params"]["elicitationId"] = new_elicitation_id()
            yield key, request

    return list(requests())
