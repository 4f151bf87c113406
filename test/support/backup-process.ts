import { backupJournal } from "../../src/adapters/stores/libsql/backup.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";

// A backup in a process of its own, for a crash point to kill (HF_DB, HF_TARGET).
const journal = LibsqlJournal.open(process.env.HF_DB!);
try {
  const report = await backupJournal(journal, process.env.HF_TARGET!);
  console.log(JSON.stringify({ kind: "backup", path: report.path }));
} finally {
  await journal.close();
}
