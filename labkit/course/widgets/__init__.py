"""The course's notebook widgets: any form-mode request as a form (`elicitation_form`), the
URL-mode consent panel (`consent_panel`), the non-blocking notebook tool call (`live_call`) and
quizzes (`quiz`). The only room of labkit that imports ipywidgets. Notebooks import these names
through `labkit.course`. Imports nothing.
"""
