import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Every journal of a bench run lives under one folder in the OS temp dir, on the same file system
 * as the floor's file, and the whole folder is removed at the end, even on Ctrl-C.
 */
export class TempRoot {
  readonly path: string;
  private removed = false;
  private readonly onSignal = () => {
    this.remove();
    process.exit(130);
  };

  constructor() {
    this.path = mkdtempSync(join(tmpdir(), "holdfast-bench-"));
    process.once("SIGINT", this.onSignal);
    process.once("SIGTERM", this.onSignal);
  }

  /** A new empty sub-folder. */
  folder(name: string): string {
    const path = join(this.path, name);
    mkdirSync(path, { recursive: true });
    return path;
  }

  remove(): void {
    if (this.removed) return;
    this.removed = true;
    process.off("SIGINT", this.onSignal);
    process.off("SIGTERM", this.onSignal);
    rmSync(this.path, { recursive: true, force: true });
  }
}
