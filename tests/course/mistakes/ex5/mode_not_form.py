# mistake: every elicitation whose mode is not "form" gets an elicitationId, mode-less (form) ones too | outcome: incorrect | next: without mode
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    requests = []
    for key, entry in input_requests.items():
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        if "params" in entry:
            params = dict(entry["params"])
            if entry["method"] == "elicitation/create" and params.get("mode") != "form":
                params["elicitationId"] = new_elicitation_id()
            request["params"] = params
        requests.append((key, request))
    return requests
