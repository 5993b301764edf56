# mistake: setdefault in the gate writes "elicitation": {} into the caller's capabilities | outcome: incorrect | next: left as they were
def url_elicitation(capabilities, message, url):
    elicitation = capabilities.setdefault("elicitation", {})
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
