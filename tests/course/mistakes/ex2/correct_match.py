# correct: a match statement with a mapping pattern
def url_elicitation(capabilities, message, url):
    match capabilities.get("elicitation"):
        case {"url": _}:
            return {
                "method": "elicitation/create",
                "params": {"mode": "url", "message": message, "url": url},
            }
        case _:
            raise ProtocolError(
                MISSING_CAPABILITY,
                "URL-mode elicitation was not declared by this request",
                {"requiredCapabilities": {"elicitation": {"url": {}}}},
            )
