# mistake: refuses with -32602 (invalid params) instead of -32021 | outcome: incorrect | next: -32021
def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ProtocolError(
            -32602,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
