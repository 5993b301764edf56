# correct: a helper for the gate, the refusal data built fresh on each call
from collections.abc import Mapping


def declares_url(capabilities):
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, Mapping) and "url" in elicitation


def url_elicitation(capabilities, message, url):
    if declares_url(capabilities):
        params = {"mode": "url", "message": message, "url": url}
        return {"method": "elicitation/create", "params": params}
    needed = {"elicitation": {"url": {}}}
    raise ProtocolError(MISSING_CAPABILITY, "URL mode required", {"requiredCapabilities": needed})
