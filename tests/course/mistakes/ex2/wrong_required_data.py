# mistake: the refusal's data says {"elicitation": {}} instead of naming the url mode | outcome: incorrect | next: requiredCapabilities
def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {}}},
        )
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
