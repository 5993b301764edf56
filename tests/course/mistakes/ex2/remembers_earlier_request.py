# mistake: remembers that an earlier request declared url and offers it to later requests that did not | outcome: incorrect | next: this request's capabilities
SEEN_URL = []


def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    if isinstance(elicitation, dict) and "url" in elicitation:
        SEEN_URL.append(True)
    if not SEEN_URL:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
