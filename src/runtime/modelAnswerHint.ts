/**
 * What a person enters for a model call's "It happened", in one line (CLI help, refusals, the
 * panel). A plain value of its own, so `holdfast --help` loads no Schema code to print it.
 */
export const MODEL_ANSWER_HINT =
  'the model\'s answer as JSON: {"text": "…"}, with "toolCalls": [{"toolName": "…", "input": {…}}] if it asked for tools';
