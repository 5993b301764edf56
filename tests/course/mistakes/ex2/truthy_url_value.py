# mistake: tests the url value's truthiness, so the declared {"url": {}} (an empty object) is refused | outcome: incorrect | next: whether the key is there
def url_elicitation(capabilities, message, url):
    if not capabilities.get("elicitation", {}).get("url"):
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
