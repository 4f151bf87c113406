import { type AuditOptions, type AuditReport, auditJournal } from "../runtime/audit.js";
import type { JournalReader } from "../runtime/Journal.js";
import { temporarySpill } from "./stores/libsql/temporarySpill.js";

/**
 * The audit as holdfast's commands and readers run it: {@link auditJournal} with a spill that moves
 * to a temporary file once it holds 20 000 entries, sealed with a throwaway key when the journal's
 * payloads are encrypted. This is what keeps the audit of a long log in bounded memory (DESIGN §8).
 *
 * @example
 * const report = await auditStore(reader, { expectHead: parseExpectedHead(anchor) });
 */
export const auditStore = (journal: JournalReader, options: AuditOptions = {}): Promise<AuditReport> =>
  auditJournal(journal, { spill: () => temporarySpill({ seal: journal.keyring !== null }), ...options });
