# mistake: the entry says mode "form" instead of "url" | outcome: incorrect | next: params.mode
def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "url": url}}
