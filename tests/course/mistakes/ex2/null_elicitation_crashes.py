# mistake: "elicitation": null reaches `"url" in None` and crashes with TypeError | outcome: error in your code | next: not an object
def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation", {})
    if "url" not in elicitation:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
