# mistake: any elicitation declaration counts as URL support (form only included) | outcome: incorrect | next: this request's capabilities
def url_elicitation(capabilities, message, url):
    if "elicitation" not in capabilities:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
