// Types of tools/doc-rules.mjs, for test/doc-rules.e2e-spec.ts.
export declare const MAX_LINES: number;
export declare const FIGURES_PAGE: string;
export declare const TROUBLESHOOTING_PAGE: string;
export declare const ERROR_CODES_SOURCE: string;
export declare function headings(text: string): Array<{ line: number; text: string }>;
export declare function lineCount(text: string): number;
export declare function errorCodesOf(source: string): string[];
export declare function missingErrorCodes(troubleshooting: string, codes: string[]): string[];
export declare function docRuleViolations(pages: Array<{ path: string; text: string }>, options?: { errorCodes?: string[] }): string[];
export declare function opensWithCurrentFigures(text: string): boolean;
