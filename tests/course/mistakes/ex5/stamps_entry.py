# mistake: stamps jsonrpc and id onto the entry itself and sends it, changing the map passed in | outcome: incorrect | next: never modified
def to_legacy_requests(
    input_requests: Mapping[str, Any],
    next_id: Callable[[], int | str],
    new_elicitation_id: Callable[[], str],
) -> list[tuple[str, dict[str, Any]]]:
    requests = []
    for key, entry in input_requests.items():
        entry["jsonrpc"] = "2.0"
        entry["id"] = next_id()
        if entry.get("params", {}).get("mode") == "url":
            entry["params"] = {**entry["params"], "elicitationId": new_elicitation_id()}
        requests.append((key, entry))
    return requests
