import type { Projection } from "./projection.js";

export interface DocumentRow {
  readonly chatId: string;
  readonly document: string;
  readonly revision: number;
  readonly value: unknown;
  readonly digest: string;
  readonly conflicts: number;
  readonly position: number;
}

/** The current revision of each per-chat document. */
export const documentsProjection: Projection<DocumentRow> = {
  name: "documents",
  version: 1,
  canHandle: ["document.replaced", "document.conflicted"],
  keysOf: (recorded) => {
    const e = recorded.event;
    return "document" in e ? [`${e.chatId}/${e.document}`] : [];
  },
  evolve: (state, recorded) => {
    const e = recorded.event;
    if (e.type === "document.replaced") {
      return {
        chatId: e.chatId,
        document: e.document,
        revision: e.revision,
        value: e.value,
        digest: e.digest,
        conflicts: state?.conflicts ?? 0,
        position: recorded.position,
      };
    }
    if (e.type === "document.conflicted") {
      return {
        chatId: e.chatId,
        document: e.document,
        revision: state?.revision ?? 0,
        value: state?.value ?? null,
        digest: state?.digest ?? "",
        conflicts: (state?.conflicts ?? 0) + 1,
        position: recorded.position,
      };
    }
    if (!state) throw new RangeError(`documents projection cannot start with ${e.type}`);
    return state;
  },
};
