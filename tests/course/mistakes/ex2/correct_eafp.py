# correct: asks forgiveness: indexes elicitation.url and turns KeyError or TypeError into the refusal
def url_elicitation(capabilities, message, url):
    try:
        capabilities["elicitation"]["url"]
    except (KeyError, TypeError):
        raise ProtocolError(
            MISSING_CAPABILITY,
            "Please allow URL mode",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        ) from None
    return dict(method="elicitation/create", params=dict(mode="url", message=message, url=url))
