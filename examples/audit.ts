// docs/audit.md's example, compiled and run by test/examples.test.ts.
import { auditJournal, openStoreReader, parseExpectedHead, temporarySpill } from "../src/audit.js";

export const auditEvidence = async (store: string, anchoredHead: string) => {
  const journal = await openStoreReader(store); // read-only: nothing is created, migrated or written
  try {
    const report = await auditJournal(journal, {
      expectHead: parseExpectedHead(anchoredHead), // "DIGEST" or "DIGEST@POSITION", as `holdfast audit` prints it
      spill: () => temporarySpill(), // bounded memory on a long log, as `holdfast audit` runs it
    });
    if (!report.clean)
      for (const f of report.findings) console.error(f.kind, f.streamId, f.version, f.detail);
    return report;
  } finally {
    await journal.close();
  }
};
