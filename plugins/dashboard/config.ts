/** The dashboard plugin's config: `[plugins.dashboard]`. */
import { z } from 'zod';

export const dashboardConfig = z.strictObject({});

export type DashboardConfig = z.output<typeof dashboardConfig>;
