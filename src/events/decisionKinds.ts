/**
 * The decisions a person can record on an in-doubt call, as a plain list: the schema is built on it
 * (`DecisionKind` in decision.ts), and what only needs the names (the CLI's help) imports this alone.
 */
export const DECISION_KINDS = [
  "resume",
  "stop",
  "new-attempt",
  "confirmed-completed",
  "confirmed-not-completed",
] as const;
