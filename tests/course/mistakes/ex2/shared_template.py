# mistake: fills in and returns one module-level entry, so every call returns the same dict | outcome: incorrect | next: each call builds its own
ENTRY = {"method": "elicitation/create", "params": {"mode": "url"}}


def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    ENTRY["params"]["message"] = message
    ENTRY["params"]["url"] = url
    return ENTRY
