# mistake: looks for the text "url" in the elicitation value, so "elicitation": "url" counts | outcome: incorrect | next: not an object
def url_elicitation(capabilities, message, url):
    if "url" not in str(capabilities.get("elicitation")):
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
