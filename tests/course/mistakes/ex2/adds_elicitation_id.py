# mistake: adds an elicitationId to the entry (2025-11-25 style) | outcome: incorrect | next: no elicitationId
import uuid


def url_elicitation(capabilities, message, url):
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict) or "url" not in elicitation:
        raise ProtocolError(
            MISSING_CAPABILITY,
            "This tool needs URL-mode elicitation",
            {"requiredCapabilities": {"elicitation": {"url": {}}}},
        )
    params = {"mode": "url", "message": message, "url": url, "elicitationId": str(uuid.uuid4())}
    return {"method": "elicitation/create", "params": params}
