# mistake: strips the message and lower-cases the URL "to tidy them" | outcome: incorrect | next: exactly as given
def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    params = {"mode": "url", "message": message.strip(), "url": url.lower()}
    return {"method": "elicitation/create", "params": params}
