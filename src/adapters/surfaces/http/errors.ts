import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";

/** An error the API answers with `{ error: { code, message, … } }` and a fitting status. */
export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** The status each of the runtime's refusals answers with. */
const STATUS_BY_TAG: Readonly<Record<string, ContentfulStatusCode>> = {
  RunNotFound: 404,
  CallNotFound: 404,
  StaleDecision: 409,
  NotAwaitingApproval: 409,
  InvalidToolArgs: 422,
  DocumentConflict: 409,
  InputConflict: 409,
  RunNotHeld: 409,
  CallNotInDoubt: 409,
  RetryNotAllowed: 409,
  ActiveRunExists: 409,
  ForkPastInDoubt: 409,
  UnknownAgentVersion: 422,
  QueuedInputNotFound: 404,
  ScheduleNotFound: 404,
  QueuedInputAdmitted: 409,
  NoteRequired: 422,
  InvalidInput: 422,
  DecisionNeedsCalls: 422,
  RetryLimitExceeded: 422,
};

const isTag = (error: unknown, tag: string): boolean =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === tag;

const KEBAB = (tag: string): string => tag.replace(/([a-z])([A-Z])/g, "$1-$2").toLowerCase();

const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, " ").trim();

/** The fields of a tagged error worth returning (ids, versions), never a stack or a payload. */
const extraOf = (error: Record<string, unknown>): Record<string, unknown> => {
  const extra: Record<string, unknown> = {};
  if (typeof error.runId === "string") extra.runId = error.runId;
  if (typeof error.callId === "string") extra.callId = error.callId;
  if (typeof error.scheduleId === "string") extra.scheduleId = error.scheduleId;
  if (error._tag === "StaleDecision" && typeof error.current === "number")
    extra.currentVersion = error.current;
  if (error._tag === "DocumentConflict" && typeof error.actual === "number")
    extra.currentRevision = error.actual;
  return extra;
};

/** Map anything a handler throws to a status and an error body; unknown errors say nothing of their insides. */
export const errorReply = (
  error: unknown,
): { status: ContentfulStatusCode; body: { error: Record<string, unknown> } } => {
  if (error instanceof ApiError) {
    return {
      status: error.status,
      body: { error: { code: error.code, message: error.message, ...error.extra } },
    };
  }
  if (isTag(error, "JournalUnavailable") || isTag(error, "JournalClosed")) {
    // The store is away (a PostgreSQL restart, a cut connection, a full disk): the server stays up and says so;
    // the client tries again. The location is masked already; the reason names no secret.
    const unavailable = error as { location: string; reason?: string; hint?: string };
    return {
      status: 503,
      body: {
        error: {
          code: "journal-unavailable",
          message: `the journal ${unavailable.location} is unavailable${unavailable.reason ? `: ${oneLine(unavailable.reason)}` : ""}`,
          hint: unavailable.hint
            ? oneLine(unavailable.hint)
            : "The server stays up and answers once the store is back; try again shortly.",
        },
      },
    };
  }
  if (typeof error === "object" && error !== null && typeof (error as { _tag?: unknown })._tag === "string") {
    const tagged = error as Record<string, unknown> & { _tag: string; message: string };
    const status = STATUS_BY_TAG[tagged._tag];
    if (status !== undefined) {
      const message = oneLine(tagged.message);
      const at = message.lastIndexOf("; ");
      return {
        status,
        body: {
          error: {
            code: KEBAB(tagged._tag),
            message: at > 0 ? message.slice(0, at) : message,
            ...(at > 0 ? { hint: message.slice(at + 2) } : {}),
            ...extraOf(tagged),
          },
        },
      };
    }
  }
  return {
    status: 500,
    body: { error: { code: "internal", message: "the server could not do this; its log says why" } },
  };
};

export const sendError = (c: Context, error: unknown) => {
  const { status, body } = errorReply(error);
  if (status === 500) console.error("holdfast serve:", error);
  if (status === 503) c.header("Retry-After", "2");
  return c.json(body, status);
};
