# mistake: accepts a url key at the top level of the capabilities as well as inside elicitation | outcome: incorrect | next: directly inside elicitation
def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    declared = "url" in capabilities or (isinstance(elicitation, dict) and "url" in elicitation)
    if not declared:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
