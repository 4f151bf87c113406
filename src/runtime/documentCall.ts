import type { Masker } from "../events/index.js";
import type { CallSpec } from "./attempt.js";
import { checkPlan, PLAN, type PlanValue, prepareReplace, readDocument } from "./documents.js";
import { CallFailed, DocumentConflict } from "./errors.js";
import type { Journal } from "./Journal.js";
import { storedCopy } from "./json.js";

export interface PlanApi {
  read(): Promise<{ readonly value: PlanValue | null; readonly revision: number }>;
  replace(expectedRevision: number, value: PlanValue): Promise<{ readonly revision: number }>;
}

/** What a document call needs from its turn. */
export interface DocumentHost {
  readonly runId: string;
  readonly chatId: string;
  readonly documents: { readonly journal: Journal; readonly masker: Masker };
  call<R>(spec: CallSpec<R>): Promise<R>;
}

type DocumentArgs =
  | { readonly op: "read" }
  | { readonly op: "replace"; readonly expectedRevision: number; readonly value: PlanValue };

/**
 * A plan read or replace as a journaled `document` call: its change commits in the same
 * transaction as its intent and outcome (decision 0006), so it is never in doubt. A stale revision
 * is a recorded failure and a `DocumentConflict` for the agent, never an overwrite.
 */
export const documentCall = <R>(host: DocumentHost, args: DocumentArgs): Promise<R> => {
  let stored: unknown;
  try {
    // Checked before anything is journaled: a bad plan writes nothing.
    const checked = args.op === "replace" ? { ...args, value: checkPlan(args.value) } : args;
    stored = storedCopy(checked, "durable_plan arguments");
  } catch (error) {
    return Promise.reject(error);
  }
  const op = stored as DocumentArgs;
  const { journal, masker } = host.documents;
  return host
    .call<R>({
      kind: "document",
      name: "durable_plan",
      args: stored,
      runArgs: stored,
      disposition: "hold",
      pin: null,
      reconciler: null,
      run: () => Promise.reject(new Error("documents commit atomically")),
      atomic: async (context) => {
        if (op.op === "read") {
          const current = await readDocument(journal, host.chatId, PLAN);
          return { outcome: { ok: { value: current.value, revision: current.revision } }, others: [] };
        }
        const prepared = await prepareReplace(
          journal,
          masker,
          host.chatId,
          PLAN,
          op.expectedRevision,
          op.value,
          {
            runId: host.runId,
            callId: context.callId,
          },
        );
        return {
          outcome: prepared.conflict
            ? {
                error: {
                  name: "DocumentConflict",
                  message: prepared.conflict.message,
                  details: { expected: prepared.conflict.expected, actual: prepared.conflict.actual },
                },
              }
            : { ok: { revision: prepared.revision } },
          others: [prepared.request],
        };
      },
    })
    .catch((error: unknown) => {
      if (error instanceof CallFailed && error.error.name === "DocumentConflict") {
        const details = (error.error.details ?? {}) as { expected?: number; actual?: number };
        throw new DocumentConflict({
          chatId: host.chatId,
          document: PLAN,
          expected: details.expected ?? -1,
          actual: details.actual ?? -1,
        });
      }
      throw error;
    });
};
