"""The night itself: the engine every maintaining flow asks (night), lanes of sites, lost answers waited out,
an interrupted run accounted for, the summary assembled, many dashboards added up."""
