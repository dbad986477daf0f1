"""The night itself: lanes of sites, an interrupted run accounted for, the summary assembled, many dashboards
added up."""
