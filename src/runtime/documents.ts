import * as Either from "effect/Either";
import * as ParseResult from "effect/ParseResult";
import * as Schema from "effect/Schema";
import {
  type AnyEvent,
  canonicalJson,
  chatStreamId,
  digestOf,
  type EventOf,
  type Masker,
} from "../events/index.js";
import type { DocumentRow } from "../projections/index.js";
import { DocumentConflict, InvalidInput, WrongExpectedVersion } from "./errors.js";
import { decodeInput, refuseSecretIds } from "./input.js";
import type { AppendRequest, Journal, JournalReader } from "./Journal.js";

/** The built-in per-chat document: the plan. */
export const PLAN = "plan";
export const PLAN_MAX_ITEMS = 100;
export const PLAN_MAX_BYTES = 64 * 1024;

export const PlanItem = Schema.Struct({ id: Schema.String, text: Schema.String, done: Schema.Boolean });
/** The plan: a title and at most 100 items `{ id, text, done }`. */
export const PlanValue = Schema.Struct({ title: Schema.String, items: Schema.Array(PlanItem) });
export type PlanValue = typeof PlanValue.Type;

/** What the `durable_plan` tool tells the agent (and what a model sees as its description). */
export const DURABLE_PLAN_DESCRIPTION = [
  "Read or replace this chat's plan: { title, items: [{ id, text, done }] }, at most 100 items and 64 KiB.",
  "replace(expectedRevision, value) succeeds only if the plan is still at expectedRevision;",
  "otherwise it fails with DocumentConflict and nothing changes: read the plan again and apply your change to it.",
  "Never repeat an external action (an email, a payment, a command) to repair a plan conflict —",
  "the plan records intentions; the journal records what happened.",
].join(" ");

/** A per-chat document as read: its value (null before the first write) and its revision. */
export interface DocumentState {
  readonly value: unknown;
  readonly revision: number;
}

/** Check a plan value: shape, at most 100 items, at most 64 KiB encoded. Nothing is written on failure. */
export const checkPlan = (value: unknown): PlanValue => {
  const decoded = Schema.decodeUnknownEither(PlanValue)(value);
  if (Either.isLeft(decoded)) {
    throw new InvalidInput({ what: "plan", detail: ParseResult.TreeFormatter.formatErrorSync(decoded.left) });
  }
  if (decoded.right.items.length > PLAN_MAX_ITEMS) {
    throw new InvalidInput({
      what: "plan",
      detail: `it has ${decoded.right.items.length} items; a plan holds at most ${PLAN_MAX_ITEMS}`,
    });
  }
  const bytes = Buffer.byteLength(canonicalJson(decoded.right), "utf8");
  if (bytes > PLAN_MAX_BYTES) {
    throw new InvalidInput({
      what: "plan",
      detail: `it is ${bytes} bytes encoded; a plan holds at most ${PLAN_MAX_BYTES}`,
    });
  }
  return decoded.right;
};

export type Author = EventOf<"document.replaced">["by"];

/**
 * Plan a replace on a chat's document: read the chat stream's head and the current revision, then
 * produce the chat-stream append (either `document.replaced` or `document.conflicted`), pinned to the
 * stream version read, so a concurrent writer makes it fail with WrongExpectedVersion rather than
 * overwrite. The caller appends it (with its own events, atomically) and retries on that error.
 */
export const prepareReplace = async (
  journal: Journal,
  masker: Masker,
  chatId: string,
  document: string,
  expectedRevision: number,
  value: unknown,
  by: Author,
): Promise<{
  readonly request: AppendRequest;
  readonly conflict: DocumentConflict | null;
  readonly revision: number;
}> => {
  const streamId = chatStreamId(chatId);
  const head = await journal.streamHead(streamId);
  const current = await readDocument(journal, chatId, document);
  const expectedVersion = head?.version ?? "no-stream";
  if (current.revision !== expectedRevision) {
    const event: AnyEvent = {
      type: "document.conflicted",
      chatId,
      document,
      expectedRevision,
      actualRevision: current.revision,
      by,
    };
    return {
      request: { streamId, expectedVersion, events: [event] },
      conflict: new DocumentConflict({
        chatId,
        document,
        expected: expectedRevision,
        actual: current.revision,
      }),
      revision: current.revision,
    };
  }
  const masked = masker.mask(value);
  const revision = current.revision + 1;
  const event: AnyEvent = {
    type: "document.replaced",
    chatId,
    document,
    revision,
    value: masked,
    digest: digestOf(masked),
    by,
  };
  return { request: { streamId, expectedVersion, events: [event] }, conflict: null, revision };
};

export const readDocument = async (
  journal: JournalReader,
  chatId: string,
  document: string,
): Promise<DocumentState> => {
  const row = await journal.projection<DocumentRow>("documents", `${chatId}/${document}`);
  return row ? { value: row.value, revision: row.revision } : { value: null, revision: 0 };
};

/** Retry a prepare-and-append while another writer moves the chat stream underneath. */
export const withDocumentRetry = async <T>(attempt: () => Promise<T>): Promise<T> => {
  for (let tries = 0; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof WrongExpectedVersion) || !error.streamId.startsWith("chat-") || tries >= 20)
        throw error;
    }
  }
};

const ReplaceRequest = Schema.Struct({
  chatId: Schema.NonEmptyTrimmedString,
  expectedRevision: Schema.Int.pipe(Schema.nonNegative()),
  value: Schema.Unknown,
  by: Schema.String.pipe(Schema.filter((s) => s.trim() !== "" || "say who edits (--by NAME)")),
});

/** People's access to documents, with the same expected-revision rule as the agent. */
export const makeDocuments = (journal: Journal, masker: Masker) => ({
  /** The plan of a chat and its revision (0 and `null` when there is none yet). */
  read: (chatId: string, document = PLAN): Promise<DocumentState> => readDocument(journal, chatId, document),
  /** Replace the plan if it is still at `expectedRevision`; else `DocumentConflict` (recorded). */
  replace: async (
    chatId: string,
    request: { readonly expectedRevision: number; readonly value: unknown; readonly by: string },
  ): Promise<DocumentState> => {
    const checked = decodeInput(ReplaceRequest, { chatId, ...request }, "document replace");
    refuseSecretIds(masker, "document replace", { chatId: checked.chatId });
    const value = checkPlan(checked.value);
    return withDocumentRetry(async () => {
      const prepared = await prepareReplace(journal, masker, chatId, PLAN, checked.expectedRevision, value, {
        person: masker.maskString(checked.by.trim()),
      });
      await journal.append(prepared.request);
      if (prepared.conflict) throw prepared.conflict;
      return { value: masker.mask(value), revision: prepared.revision };
    });
  },
});
/** `runtime.documents`: read and replace a chat's documents (the plan) with the expected-revision rule. */
export type Documents = ReturnType<typeof makeDocuments>;
