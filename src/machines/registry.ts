import { RUN_MACHINE_VERSION, runMachine } from "./run.js";

/**
 * Every run-machine version still present in stored logs. A run folds through the version recorded
 * in its `run.admitted`, so changing behaviour means adding a version here, never editing one.
 */
export const runMachines = {
  [RUN_MACHINE_VERSION]: runMachine,
} as const;

export const CURRENT_RUN_MACHINE = RUN_MACHINE_VERSION;

export const runMachineFor = (version: string): typeof runMachine | undefined =>
  (runMachines as Record<string, typeof runMachine>)[version];
