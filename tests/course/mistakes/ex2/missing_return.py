# mistake: builds the entry but forgets to return it | outcome: incorrect | next: missing return
def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    entry = {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
