"""The tests ``make check`` leaves to ``make test``: each took 0.75 CPU-seconds or more (in
a whole run with ``-n 2``, or in a ``make check`` run, December; most set up fleets, plans
or stacks on moto, or run many scans), and together about 80 % of the unit and functional
tiers' time. ``make test`` runs every test, these included; ``make check`` (the inner loop,
under a minute) skips them with ``-m "not slow"``. tests/conftest.py marks them ``slow``.

By file, then test name (every parametrized case of a name). A name not found here is not
an error: a renamed or moved test simply runs in ``make check`` too, until it is listed again.
"""

from __future__ import annotations

SLOW: dict[str, tuple[str, ...]] = {
    "tests/act/test_ec2_actuator_iam_conditions.py": (
        "test_an_opted_in_resource_without_a_project_is_not_warned_with_a_call_its_role_refuses",
        "test_taking_a_warned_instance_out_of_scope_does_not_fail_every_run_forever",
    ),
    "tests/act/test_late_and_repeated_schedules.py": (
        "test_a_late_scheduled_event_does_not_shorten_the_owners_warning",
        "test_the_same_scheduled_time_twice_warns_the_owner_once",
    ),
    "tests/alerts/test_sns_message_limits.py": (
        "test_guard_alerts_with_huge_or_odd_user_text_are_published_within_sns_rules",
    ),
    "tests/launch/test_burst_and_retry.py": (
        "test_a_burst_of_1000_launches_alerts_each_once_with_calls_that_grow_with_events_not_retries",
    ),
    "tests/functional/test_act_handler.py": (
        "test_a_failed_action_fails_the_invocation_after_the_others_ran",
    ),
    "tests/functional/test_advice_digest_handler.py": (
        "test_switched_off_or_under_the_minimum_no_digest_is_sent",
        "test_the_scan_sends_the_days_advice_once_and_again_the_next_day",
    ),
    "tests/functional/test_cli_accounts.py": (
        "test_scans_at_most_the_given_number_of_accounts_at_once",
        "test_scans_each_account_and_reports_the_one_it_cannot_enter",
    ),
    "tests/functional/test_cli_org.py": (
        "test_one_account_s_unreadable_tags_do_not_stop_the_others_being_scanned",
    ),
    "tests/functional/test_ec2_adapter.py": ("test_api_calls_grow_with_pages_not_with_instances",),
    "tests/functional/test_idle_guard.py": (
        "test_a_late_deadline_run_reads_since_the_warning_in_one_call_for_all",
        "test_a_notebook_tag_on_an_auto_scaling_member_is_a_finding_never_a_stop",
        "test_activity_after_the_warning_withdraws_it_at_the_deadline",
        "test_busy_notebooks_cost_no_executor_call",
        "test_dry_run_reports_each_would_be_action_with_its_savings",
        "test_exempting_during_the_grace_period_withdraws_the_warning",
        "test_two_overlapping_runs_stop_once_and_notify_once",
        "test_warns_then_stops_an_idle_notebook_and_leaves_the_rest",
    ),
    "tests/functional/test_idle_handler_calls.py": (
        "test_a_dry_run_pass_costs_pages_not_a_call_per_idle_notebook",
        "test_an_enforcing_pass_costs_pages_plus_the_actions_own_calls",
    ),
    "tests/functional/test_idle_search.py": (
        "test_an_all_idle_pass_over_1000_notebooks_takes_at_most_10_calls",
        "test_search_reports_the_missing_gpu_and_reads_no_cpu_where_a_gpu_is_busy",
    ),
    "tests/functional/test_ledger_contract.py": (
        "test_large_snapshots_and_huge_keys_fit",
        "test_statuses_read_many_claims_at_once",
    ),
    "tests/functional/test_org_act.py": (
        "test_a_message_naming_no_allowed_region_fails_and_acts_nowhere",
        "test_a_redelivered_run_acts_on_nothing_twice",
        "test_an_account_without_the_act_role_fails_alone_and_is_named_once_a_day",
        "test_dry_run_reports_what_it_would_do_in_member_accounts_and_changes_nothing",
        "test_the_stale_volume_guard_warns_then_acts_in_the_member_account_only",
    ),
    "tests/functional/test_org_budgets.py": (
        "test_owners_tagged_in_member_accounts_are_the_rolled_up_project_s_owners",
        "test_the_central_table_wins_over_budgets_tagged_in_member_accounts",
        "test_the_roll_up_sends_one_advice_digest_per_project_across_accounts",
    ),
    "tests/functional/test_org_fanout.py": (
        "test_a_poison_account_is_named_in_a_finding_and_an_alert_and_the_rest_go_on",
        "test_a_region_whose_gpu_stopped_keeps_its_month_in_the_roll_up",
        "test_duplicate_and_late_probe_messages_change_nothing",
        "test_reads_regions_probes_then_scans_only_the_region_that_holds_a_gpu",
    ),
    "tests/functional/test_org_handlers.py": (
        "test_the_fan_out_refuses_an_implausible_time_and_enqueues_nothing",
    ),
    "tests/functional/test_org_slices.py": (
        "test_a_duplicate_message_adds_nothing_and_a_late_slice_is_counted_once",
        "test_a_late_slice_of_an_aggregated_time_counts_in_the_next_aggregation",
        "test_the_missing_account_is_alerted_once_by_name",
    ),
    "tests/functional/test_scan_handler.py": (
        "test_a_dry_run_deployment_still_alerts_within_the_scan",
        "test_an_event_time_with_an_offset_is_converted_to_utc",
    ),
    "tests/functional/test_scan_hostile_tags.py": (
        "test_a_scan_over_arbitrary_tags_completes_and_reports_every_bad_tag",
    ),
    "tests/functional/test_slice_book_contract.py": (
        "test_a_done_slice_keeps_its_advice_bounded_per_project",
        "test_marking_a_slice_done_costs_the_same_in_a_plan_of_2000_slices",
    ),
    "tests/functional/test_sns_notifier.py": (
        "test_an_alert_with_thousands_of_unicode_named_resources_is_shrunk_to_fit",
        "test_the_limit_is_counted_in_bytes_not_characters",
        "test_thousands_of_untagged_gpus_with_unicode_owners_alert_through_sns",
    ),
    "tests/functional/test_stale_objects.py": (
        "test_deletes_only_objects_past_their_ttl_after_warning_and_keeps_the_rest",
    ),
    "tests/functional/test_stale_volumes.py": (
        "test_a_warning_is_withdrawn_when_the_snapshot_loses_its_ttl",
        "test_calls_per_pass_grow_with_pages_not_with_the_fleet",
        "test_one_cloudtrail_lookup_per_region_and_run_proves_every_volume",
        "test_the_whole_cycle_runs_within_the_declared_tag_conditions",
        "test_two_overlapping_runs_snapshot_once_and_delete_once",
    ),
    "tests/functional/test_survives.py": (
        "test_a_failed_read_is_not_a_recovery_and_not_a_spike",
        "test_a_late_retry_of_an_older_scan_counts_nothing_twice",
        "test_a_scan_failing_at_any_ledger_call_never_double_counts",
        "test_hundreds_of_untagged_gpus_are_one_alert_that_fits_in_sns",
        "test_the_digest_covers_an_outage_that_ended_before_the_digest_hour",
    ),
    "tests/functional/test_sweep_backstop_lifecycle.py": (
        "test_a_bucket_whose_region_is_no_longer_guarded_loses_costguards_rule",
        "test_a_stand_down_overlapping_the_pass_that_installs_the_rule_leaves_no_rule_behind",
        "test_a_tripped_breaker_suspends_costguards_rule_until_the_owner_confirms",
        "test_dry_run_withdraws_costguards_rule_whatever_ended_the_decision",
        "test_removes_only_costguards_rule_when_the_bucket_is_exempted",
        "test_removes_the_old_rule_when_the_ttl_is_raised_and_installs_the_new_one_after_warning",
        "test_the_rule_returns_after_a_dry_run_pause_only_with_a_pass_the_breaker_allows",
    ),
    "tests/functional/test_sweep_savings.py": (
        "test_a_run_that_fails_after_deleting_still_counts_what_it_deleted",
        "test_each_byte_the_sweep_deletes_is_saved_once_whoever_adds_it_up",
    ),
    "tests/functional/test_unparseable_answers.py": (
        "test_a_scan_against_an_html_answering_endpoint_fails_each_source_in_one_line",
        "test_each_inventory_call_answered_with_html_is_a_failed_source_of_the_scan",
    ),
    "tests/idle/test_managed_nodes_never_stopped.py": (
        "test_all_accelerators_never_stops_an_eks_node_group_instance",
    ),
    "tests/idle/test_warning_covers_the_stop.py": (
        "test_activity_after_the_warning_withdraws_it_even_when_the_next_run_is_late",
    ),
    "tests/org/test_guards_across_accounts.py": (
        "test_a_member_region_holding_only_a_cpu_notebook_is_guarded_for_idleness",
        "test_a_run_acts_only_in_the_allowed_regions_whatever_regions_its_message_names",
        "test_same_named_notebooks_in_two_accounts_are_each_warned_and_stopped_once",
        "test_the_idle_guard_warns_in_a_members_other_regions_when_one_region_refuses_ec2",
        "test_the_stale_object_sweep_runs_in_the_member_account_on_the_lambdas_time_budget",
    ),
    "tests/org/test_savings_retry.py": (
        "test_a_stop_whose_index_write_failed_is_counted_once_its_retry_succeeds",
    ),
    "tests/pricing/test_estimate_cli_errors.py": (
        "test_estimate_bad_input_is_one_line_and_exit_2",
    ),
    "tests/pricing/test_price_refresh.py": (
        "test_a_huge_fetched_price_is_held_and_reported_not_a_crash",
        "test_a_malformed_price_in_the_price_list_is_skipped_not_a_traceback",
        "test_the_readme_does_not_tell_users_to_write_the_package_catalog_the_cli_refuses",
    ),
    "tests/pricing/test_scan_catalog_use.py": ("test_a_cli_scan_with_a_stale_catalog_reports_it",),
    "tests/sweep/test_lifecycle_backstop.py": (
        "test_removing_the_ttl_tag_removes_costguards_lifecycle_rule",
    ),
    "tests/unit/test_fanout_service.py": (
        "test_a_tick_costs_the_active_slices_plus_a_small_probe_term_not_every_slice",
    ),
    "tests/unit/test_one_clock.py": (
        "test_the_product_and_the_demos_read_the_wall_clock_only_through_the_one_clock",
    ),
    "tests/unit/test_product_boundary.py": (
        "test_only_the_cli_demo_command_imports_the_demo_and_only_inside_itself",
    ),
    "tests/unit/test_rendering.py": ("test_any_alert_renders_as_block_kit_slack_accepts",),
    "tests/unit/test_tag_properties.py": (
        "test_every_tag_value_becomes_a_value_or_a_finding_naming_resource_and_tag",
    ),
    "tests/report/test_report_html.py": ("test_a_hundred_projects_stay_under_a_megabyte",),
    "tests/report/test_ledger_days.py": (
        "test_a_month_of_days_for_hundreds_of_long_named_projects_fits",
    ),
    "tests/cli/test_demo_text.py": (
        "test_the_idle_chapter_says_each_verdict_once_and_its_wait_in_words",
    ),
    "tests/lifetime/test_lifetime_guard.py": (
        "test_the_default_lifetime_warns_once_then_stops_an_untagged_accelerator",
        "test_a_lifetime_tag_removed_mid_flight_withdraws_the_warning",
    ),
    "tests/functional/test_heartbeat_agent.py": ("test_a_broken_nvidia_smi_is_no_gpu_reading",),
}


#: What the longest work units of ``make test`` cost, in seconds (a whole run with ``-n 2``
#: on the reference machine, December, scaled to an idle one): an xdist group (``@`` and
#: its name, tests/conftest.py) with its fixture, or a test alone (each parametrized case).
#: tests/conftest.py hands these out first, longest first, so that no long one starts last
#: and keeps one worker busy while the other waits. A unit not listed counts 0 here and
#: keeps its place after these; a stale figure changes only the order.
LONGEST: dict[str, float] = {
    "@cdk-synths": 68.0,
    "tests/launch/test_burst_and_retry.py::test_a_burst_of_1000_launches_alerts_each_once_with_calls_that_grow_with_events_not_retries": 33.0,
    "@tests/e2e/test_org_demo.py": 27.0,
    "tests/functional/test_idle_handler_calls.py::test_an_enforcing_pass_costs_pages_plus_the_actions_own_calls": 24.0,
    "tests/property/test_sweep_over_days.py::test_nothing_goes_that_the_readme_keeps_over_simulated_days": 21.0,
    "tests/functional/test_slice_book_contract.py::test_marking_a_slice_done_costs_the_same_in_a_plan_of_2000_slices": 21.0,
    "tests/cli/test_demo_text.py::test_the_whole_demo_reads_cleanly": 19.0,
    "tests/e2e/test_demo.py::test_demo_runs_a_whole_guard_cycle_and_delivers_alerts_everywhere": 18.0,
    "tests/infra/test_hub_stack.py::test_cdk_synth_with_org_context_works_without_an_account": 17.5,
    "tests/infra/test_member_stack.py::test_member_app_run_directly_takes_context_as_the_cdk_cli_and_the_main_app_do": 12.0,
    "tests/e2e/test_org_demo.py::test_exits_1_when_an_account_that_has_its_role_cannot_be_entered": 10.4,
    "tests/e2e/test_org_demo.py::test_an_account_whose_act_role_refuses_is_named_once_a_day_and_the_others_guarded": 10.1,
    "tests/infra/test_hub_stack.py::test_org_template_synthesizes_with_nag_and_passes_cfn_lint": 8.2,
    "tests/e2e/test_org_demo.py::test_with_dry_run_the_guards_say_what_they_would_do_and_save_and_change_nothing": 7.4,
    "tests/infra/test_launch_alerts_stack.py::test_the_forwarding_templates_pass_cfn_lint_without_errors": 5.7,
    "tests/functional/test_survives.py::test_a_scan_failing_at_any_ledger_call_never_double_counts": 5.6,
    "tests/functional/test_survives.py::test_hundreds_of_untagged_gpus_are_one_alert_that_fits_in_sns": 5.5,
    "tests/functional/test_sweep_backstop_lifecycle.py::test_dry_run_withdraws_costguards_rule_whatever_ended_the_decision": 5.2,
    "tests/infra/test_launch_alerts_stack.py::test_each_other_scanned_region_forwards_its_launches_to_the_home_regions_bus": 4.5,
    "tests/property/test_text_properties.py::test_truncation_never_exceeds_the_width_nor_cuts_a_token": 4.5,
    "tests/functional/test_idle_handler_calls.py::test_a_dry_run_pass_costs_pages_not_a_call_per_idle_notebook": 3.7,
    "tests/infra/test_hub_stack.py::test_cdk_synth_with_an_incomplete_org_context_exits_2_with_the_reason": 3.7,
    "tests/alerts/test_sns_message_limits.py::test_guard_alerts_with_huge_or_odd_user_text_are_published_within_sns_rules": 2.5,
    "tests/functional/test_stale_volumes.py::test_calls_per_pass_grow_with_pages_not_with_the_fleet": 2.9,
    "tests/functional/test_survives.py::test_the_digest_covers_an_outage_that_ended_before_the_digest_hour": 2.8,
    "tests/unit/test_fanout_service.py::test_a_tick_costs_the_active_slices_plus_a_small_probe_term_not_every_slice": 1.7,
}  # fmt: skip
