"""Tests of forge-report and what the front says: report, report_html, report_page, odds, optuna_study."""
