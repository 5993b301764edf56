# mistake: refuses with ValueError instead of labkit.ProtocolError | outcome: incorrect | next: ProtocolError
def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ValueError("this request did not declare URL-mode elicitation")
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}
