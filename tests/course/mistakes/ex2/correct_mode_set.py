# correct: the declared modes as a set, read without changing the capabilities; the entry built with dict()
def declared_modes(capabilities):
    elicitation = capabilities.get("elicitation", {})
    return set(elicitation) if isinstance(elicitation, dict) else set()


def url_elicitation(capabilities, message, url):
    if "url" in declared_modes(capabilities):
        return dict(method="elicitation/create", params=dict(mode="url", message=message, url=url))
    data = dict(requiredCapabilities=dict(elicitation=dict(url=dict())))
    raise ProtocolError(MISSING_CAPABILITY, "URL mode was not declared", data)
