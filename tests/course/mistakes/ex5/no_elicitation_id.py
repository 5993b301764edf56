# mistake: forgets the elicitationId a URL-mode entry needs at 2025-11-25 | outcome: incorrect | next: new_elicitation_id()
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    requests = []
    for key, entry in input_requests.items():
        request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}
        if "params" in entry:
            request["params"] = dict(entry["params"])
        requests.append((key, request))
    return requests
